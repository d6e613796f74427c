/* The bell: one socket on /ws/notifications/ per page. Each notification frame fires
   `markus:notification` on <body>; the bell and the notification list are htmx elements
   listening for it, so they read their server-rendered selves again. A refusal (4401,
   4403) is final; any other close reconnects with a growing delay. */
(function () {
  "use strict";
  var delay = 1000;
  function connect() {
    var bell = document.getElementById("bell");
    if (!bell) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + "/ws/notifications/");
    ws.onopen = function () { delay = 1000; bell.dataset.live = "on"; };
    ws.onmessage = function (ev) {
      var frame;
      try { frame = JSON.parse(ev.data); } catch (e) { return; }
      if (!frame || frame.type !== "notification") return;
      document.body.dispatchEvent(new CustomEvent("markus:notification", { detail: frame.notification || {} }));
    };
    ws.onclose = function (ev) {
      bell.dataset.live = "off";
      if (ev.code === 4401 || ev.code === 4403) { bell.title = "Notifications (not live: " + (ev.reason || ev.code) + ")"; return; }
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
})();
