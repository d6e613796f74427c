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

  // The chat box: POST with Accept: text/event-stream, the reply streamed as it comes.
  var form = document.getElementById("chat");
  if (!form) return;
  var box = document.getElementById("chat-reply");
  var text = document.getElementById("chat-text");
  text.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    var message = text.value.trim();
    if (!message) return;
    // Each message gets its own reply line; sending again while a reply streams is
    // allowed (a follow-up in the same chat merges into the one in hand).
    box.hidden = false;
    var pair = document.createElement("div");
    pair.className = "chat-pair streaming";
    var you = document.createElement("p"); you.className = "chat-you"; you.textContent = message;
    var reply = document.createElement("p"); reply.className = "chat-answer";
    pair.append(you, reply);
    box.append(pair);
    while (box.children.length > 5) box.firstElementChild.remove();
    text.value = "";
    try {
      var response = await fetch(form.dataset.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": form.dataset.csrf },
        body: JSON.stringify({ text: message }),
      });
      if (!response.ok || !response.body) {
        var body = await response.text();
        var detail = body;
        try { detail = JSON.parse(body).detail || body; } catch (_) { /* not JSON */ }
        throw new Error(response.status + " " + detail);
      }
      var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        var events = buffer.split("\n\n");
        buffer = events.pop();
        events.forEach(function (raw) {
          var name = "", data = "";
          raw.split("\n").forEach(function (line) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          });
          if (!data) return;
          var payload = JSON.parse(data);
          if (name === "delta") reply.textContent += payload.text;
          else if (name === "done") {
            if (payload.reply && !reply.textContent) reply.textContent = payload.reply;
            if (payload.reply === null) reply.textContent += " (no reply yet: it will appear in the timeline)";
            pair.className = "chat-pair done";
          }
        });
      }
      pair.className = "chat-pair done";
    } catch (err) {
      pair.className = "chat-pair failed";
      reply.textContent = "Not sent: " + err.message;
    }
  });
})();
