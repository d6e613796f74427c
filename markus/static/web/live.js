/* The work pages' live events: one socket on /ws/board/ per page. Each frame fires an
   event on <body> with the frame as its detail: `markus:task` (a task's status or a
   comment on it: detail.taskId), `markus:requirement` (detail.requirementId) and
   `markus:agents` (an agent created or removed). The page's htmx regions listen for
   them and read their server-rendered selves again. A refusal (4401) is final; any
   other close reconnects with a growing delay, and a reconnect fires `markus:resync`
   (what changed while the socket was down). */
(function () {
  "use strict";
  var delay = 1000, opened = false;
  var names = {
    "task:status": "markus:task", "task:comment": "markus:task",
    "requirement:status": "markus:requirement", "requirement:comment": "markus:requirement",
    "agent:created": "markus:agents", "agent:removed": "markus:agents"
  };
  function fire(name, detail) { document.body.dispatchEvent(new CustomEvent(name, { detail: detail || {} })); }
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + "/ws/board/");
    ws.onopen = function () {
      delay = 1000;
      document.body.dataset.workLive = "on";
      if (opened) { fire("markus:task", {}); fire("markus:requirement", {}); fire("markus:agents", {}); }
      opened = true;
    };
    ws.onmessage = function (ev) {
      var frame;
      try { frame = JSON.parse(ev.data); } catch (e) { return; }
      var name = frame && names[frame.type];
      if (name) fire(name, frame);
    };
    ws.onclose = function (ev) {
      document.body.dataset.workLive = "off";
      if (ev.code === 4401 || ev.code === 4403) return;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
})();
