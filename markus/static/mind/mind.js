/* The mind view's control room: the chat box (a streamed reply), the focus clock, and
   refusals of the controls shown in place. Everything else is htmx. */
(function () {
  "use strict";

  // A refused control (409) answers with the header and its message: swap it in.
  document.body.addEventListener("htmx:beforeSwap", function (evt) {
    var status = evt.detail.xhr.status;
    if (status === 409) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    } else if (status === 403 || status === 404) {
      window.alert(evt.detail.xhr.responseText.slice(0, 300) || "Refused");
    }
  });

  // The focus clock: "for 12s", ticking.
  function fmt(seconds) {
    if (seconds < 60) return Math.floor(seconds) + "s";
    var m = Math.floor(seconds / 60), s = Math.floor(seconds % 60);
    if (m < 60) return m + "m " + String(s).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
  }
  function tick() {
    document.querySelectorAll("time.elapsed[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (!isNaN(since)) el.textContent = fmt(Math.max(0, (Date.now() - since) / 1000));
    });
  }
  tick();
  window.setInterval(tick, 1000);

  // The chat box (web/chat_stream.js): the reply streamed as it comes; the last five
  // pairs stay (a follow-up in the same chat merges into the one in hand).
  var form = document.getElementById("chat");
  if (form) window.MarkusChat.attach(form, { keep: 5, later: "in the timeline" });
})();
