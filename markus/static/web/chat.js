/* The chat page. Sending: POST to the chat endpoint with Accept: text/event-stream, the
   reply streamed into a pending pair; when it is done the stored messages are read
   (`after` the last one shown) and the pair gives way to them. Live: the agent's socket
   (/ws/agents/<id>/); a `chat:message` (a notify_user message) or a finished chat item
   reads what is new in this session the same way. A refusal (4401, 4403, 4404) is
   final; any other close reconnects with a growing delay and catches up. */
(function () {
  "use strict";
  var main = document.getElementById("chat-main");
  var form = document.getElementById("chat");
  if (!main || !form) return;
  var list = document.getElementById("messages");
  var box = document.getElementById("chat-reply");
  var text = document.getElementById("chat-text");
  var live = document.getElementById("chat-live");
  var reading = null, again = false;

  function lastId() {
    var rows = list.querySelectorAll("li.msg");
    return rows.length ? rows[rows.length - 1].dataset.id : "";
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
        if (!id) list.innerHTML = html; else list.insertAdjacentHTML("beforeend", html);
        if (window.htmx) window.htmx.process(list);
        list.lastElementChild && list.lastElementChild.scrollIntoView({ block: "end" });
      })
      .finally(function () {
        reading = null;
        if (again) { again = false; catchUp(); }
      });
    return reading;
  }

  text.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    var message = text.value.trim();
    if (!message) return;
    box.hidden = false;
    var pair = document.createElement("div");
    pair.className = "chat-pair streaming";
    var you = document.createElement("p"); you.className = "chat-you"; you.textContent = message;
    var reply = document.createElement("p"); reply.className = "chat-answer";
    pair.append(you, reply);
    box.append(pair);
    text.value = "";
    var body = { text: message };
    if (form.dataset.session) body.sessionId = form.dataset.session;
    try {
      var response = await fetch(form.dataset.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": form.dataset.csrf },
        body: JSON.stringify(body),
      });
      if (!response.ok || !response.body) {
        var raw = await response.text(), detail = raw;
        try { detail = JSON.parse(raw).detail || raw; } catch (_) { /* not JSON */ }
        throw new Error(response.status + " " + detail);
      }
      var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "", done = false;
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        var events = buffer.split("\n\n");
        buffer = events.pop();
        events.forEach(function (rawEvent) {
          var name = "", data = "";
          rawEvent.split("\n").forEach(function (line) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          });
          if (!data) return;
          var payload = JSON.parse(data);
          if (name === "delta") reply.textContent += payload.text;
          else if (name === "done") {
            done = true;
            if (payload.reply === null) reply.textContent += " (no reply yet: it will appear here when it is written)";
          }
        });
      }
      pair.className = "chat-pair done";
      if (done) { await catchUp(); pair.remove(); if (!box.children.length) box.hidden = true; }
    } catch (err) {
      pair.className = "chat-pair failed";
      reply.textContent = "Not sent: " + err.message;
    }
  });

  var delay = 1000;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + "/ws/agents/" + encodeURIComponent(main.dataset.agent) + "/");
    ws.onopen = function () { delay = 1000; live.dataset.live = "on"; catchUp(); };
    ws.onmessage = function (ev) {
      var event;
      try { event = JSON.parse(ev.data); } catch (_) { return; }
      if (!event) return;
      if (event.type === "chat:message" && event.sessionId === main.dataset.session) catchUp();
      else if (event.type === "agent:mailbox" && event.item && event.item.sourceType === main.dataset.chatType &&
               ["completed", "failed", "dropped"].indexOf(event.item.status) >= 0) catchUp();
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
