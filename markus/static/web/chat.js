/* The chat page. Sending: web/chat_stream.js (the reply streamed into a pending pair);
   when it is done the stored messages are read (`after` the last one shown) and the
   pair gives way to them (and the session's count in the list grows by them). Live: the agent's socket (/ws/agents/<id>/); a
   `chat:message` (a notify_user message) or a finished chat item reads what is new in
   this session the same way; any change of a chat item reads again what the session
   waits for (#chat-waiting: an approval its message's tool call is parked for, with a
   link to answer it), so it shows while it waits and clears once answered. A refusal
   (4401, 4403, 4404) is
   final; any other close reconnects with a growing delay and catches up. */
(function () {
  "use strict";
  var main = document.getElementById("chat-main");
  var form = document.getElementById("chat");
  if (!main || !form) return;
  var list = document.getElementById("messages");
  var box = document.getElementById("chat-reply");
  var live = document.getElementById("chat-live");
  var reading = null, again = false;

  function lastId() {
    var rows = list.querySelectorAll("li.msg");
    return rows.length ? rows[rows.length - 1].dataset.id : "";
  }

  // The shown session's count in the list of sessions, raised by the messages read.
  function count(added) {
    var shown = document.querySelector(".chat-sessions .current .session-count");
    if (!shown || added <= 0) return;
    var n = Number(shown.dataset.count) + added;
    shown.dataset.count = n;
    shown.textContent = n + (n === 1 ? " message" : " messages");
  }

  // Read the messages after the last one shown (all of the first page if none is).
  function catchUp() {
    if (reading) { again = true; return reading; }
    var id = lastId();
    var url = main.dataset.messagesUrl + (id ? "&after=" + encodeURIComponent(id) : "");
    reading = fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (html) {
        if (!html.trim()) return;
        var empty = document.getElementById("no-messages");
        if (empty) empty.remove();
        var before = list.querySelectorAll("li.msg").length;
        if (!id) list.innerHTML = html; else list.insertAdjacentHTML("beforeend", html);
        count(list.querySelectorAll("li.msg").length - before);
        if (window.htmx) window.htmx.process(list);
        list.lastElementChild && list.lastElementChild.scrollIntoView({ block: "end" });
      })
      .finally(function () {
        reading = null;
        if (again) { again = false; catchUp(); }
      });
    return reading;
  }

  // What the session waits for, read again (the server says whose approval, and links it).
  function readWaiting() {
    fetch(main.dataset.messagesUrl + "&waiting=1", { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (html) {
        var shown = document.getElementById("chat-waiting");
        if (html.trim() && shown) shown.outerHTML = html;
      });
  }

  window.MarkusChat.attach(form, {
    body: function (message) {
      return form.dataset.session ? { text: message, sessionId: form.dataset.session } : { text: message };
    },
    later: "here when it is written",
    // The stored messages replace the pair (read `after` the last one shown).
    done: async function (pair) {
      await catchUp();
      pair.remove();
      if (!box.children.length) box.hidden = true;
    },
  });

  var delay = 1000;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + "/ws/agents/" + encodeURIComponent(main.dataset.agent) + "/");
    ws.onopen = function () { delay = 1000; live.dataset.live = "on"; catchUp(); readWaiting(); };
    ws.onmessage = function (ev) {
      var event;
      try { event = JSON.parse(ev.data); } catch (_) { return; }
      if (!event) return;
      if (event.type === "chat:message" && event.sessionId === main.dataset.session) catchUp();
      else if (event.type === "agent:mailbox" && event.item && event.item.sourceType === main.dataset.chatType) {
        if (["completed", "failed", "dropped"].indexOf(event.item.status) >= 0) catchUp();
        var shown = document.getElementById("chat-waiting");
        if ((event.item.marks || {}).waitingForApproval || (shown && !shown.hidden)) readWaiting();
      }
    };
    ws.onclose = function (ev) {
      live.dataset.live = "off";
      if (ev.code === 4401 || ev.code === 4403 || ev.code === 4404) { live.title = "Not live: " + (ev.reason || ev.code); return; }
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
  list.lastElementChild && list.lastElementChild.scrollIntoView({ block: "end" });
})();
