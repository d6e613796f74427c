/* A chat message sent from a page and its reply streamed: the chat page and the mind
   view's chat box share it.

   MarkusChat.stream(url, csrf, body, onEvent): POST `body` as JSON with Accept:
   text/event-stream (session cookie and CSRF, like every form) and call
   onEvent(name, payload) for each server-sent event as it arrives (`delta` {text,
   run}, then `done` {reply, mailboxItemId, sessionId}). A refusal rejects with
   "<status> <detail>" (the error's `detail`, or its text). A send no event answered
   (the network, a 5xx or a 429) is sent again a few times with the same
   Idempotency-Key: the server stores the message once and answers the send that
   gets through as the first would have been. A stream that drops before
   `done` (a flaky network) is resumed: GET the same URL with Last-Event-ID, the id of
   the last event read, a few times with a growing pause; the server sends what was
   missed, each event once, so onEvent sees the reply whole.

   MarkusChat.attach(form, options): a chat form (data-url, data-csrf; its textarea
   `text`, whose data-max-chars is the chat's limit, and its `.chat-reply` box). A
   message over the limit is refused with the limit and stays in the box whole (a
   maxlength would cut a paste in silence); so does one the server refuses. Enter
   sends, Shift+Enter is a new line; each
   message gets a pair in the box (the message, the reply streamed into it), and
   sending again while a reply streams is allowed. A delta of a new run (the item taken
   up again after Pause and Resume) starts the reply over, and `done` shows the stored
   reply, so the box never holds a first partial reply followed by the new one. Options: `body(text)` (the request
   body, default {text}), `keep` (the most pairs the box shows), `later` (where a reply
   that is not written yet will appear), `done(pair, payload)` (after a stream that
   ended with `done`; may return a promise). */
window.MarkusChat = (function () {
  "use strict";

  var RESUMES = 5;  // tries to resume a dropped stream (0.5 s, 1 s, 2 s, 4 s, 8 s apart)
  var SENDS = 4;  // sends of a message no event answered (0.5 s, 1 s, 2 s apart), one key for all

  // One event's lines ("id: ...", "event: name", "data: ..."): its id, name and JSON payload.
  function parse(raw) {
    var id = null, name = "", data = "";
    raw.split("\n").forEach(function (line) {
      if (line.startsWith("id: ")) id = line.slice(4);
      else if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    });
    return data ? { id: id, name: name, payload: JSON.parse(data) } : null;
  }

  async function refusal(response) {
    var raw = await response.text(), detail = raw;
    try { detail = JSON.parse(raw).detail || raw; } catch (_) { /* not JSON */ }
    return new Error(response.status + " " + detail);
  }

  // Read a stream's events into onEvent, noting the last id and whether `done` came.
  async function read(response, onEvent, seen) {
    var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) return;
      buffer += decoder.decode(chunk.value, { stream: true });
      var events = buffer.split("\n\n");
      buffer = events.pop();  // an event cut in two waits for its end
      events.forEach(function (raw) {
        var event = parse(raw);
        if (!event) return;
        seen.any = true;
        if (event.id) seen.last = event.id;
        if (event.name === "done") seen.done = true;
        onEvent(event.name, event.payload);
      });
    }
  }

  function pause(ms) { return new Promise(function (wake) { setTimeout(wake, ms); }); }

  // A message's Idempotency-Key: 32 hex digits (getRandomValues works on plain http too).
  function newKey() {
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }

  // One request: its response to read; null when it is worth sending again (the
  // network, a 5xx, a 429), with why in `seen.failure`; any other refusal is thrown.
  async function answered(url, init, seen) {
    var response;
    try { response = await fetch(url, init); } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      seen.failure = err;  // the network
      return null;
    }
    if (response.ok && response.body) return response;
    var refused = await refusal(response);
    if (response.status !== 429 && response.status < 500) throw refused;
    seen.failure = refused;
    return null;
  }

  async function stream(url, csrf, body, onEvent) {
    var key = newKey(), seen = { any: false, last: null, done: false, failure: null };
    // Sent until an event comes back: a message whose answer was lost (the network, a
    // 5xx, a 429) may be stored already; sent again with its key, it is stored once and
    // answered as the first send.
    for (var send = 0; send < SENDS && !seen.any; send++) {
      if (send) await pause(500 * Math.pow(2, send - 1));
      var response = await answered(url, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": csrf,
          "Idempotency-Key": key,
        },
        body: JSON.stringify(body),
      }, seen);
      if (!response) continue;
      try { await read(response, onEvent, seen); } catch (err) {
        seen.failure = err;
        if (seen.any && !seen.last) throw err;  // cut after events it cannot resume from
      }
    }
    if (!seen.any) throw seen.failure || new Error("no answer came");
    for (var attempt = 0; !seen.done && seen.last && attempt < RESUMES; attempt++) {
      await pause(500 * Math.pow(2, attempt));
      var again = await answered(url, {
        credentials: "same-origin",
        headers: { "Accept": "text/event-stream", "Last-Event-ID": seen.last },
      }, seen);
      if (!again) continue;
      try { await read(again, onEvent, seen); } catch (err) {
        if (!(err instanceof TypeError)) throw err;  // (the network again: resumed once more)
      }
    }
    if (!seen.done && seen.last) throw new Error("the connection dropped before the reply was done; it will appear in the session");
  }

  function attach(form, options) {
    options = options || {};
    var text = form.querySelector("textarea[name=text]");
    var box = form.querySelector(".chat-reply");
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
      while (options.keep && box.children.length > options.keep) box.firstElementChild.remove();
      var max = Number(text.dataset.maxChars) || Infinity;
      if (message.length > max) {
        pair.className = "chat-pair failed";
        you.textContent = message.slice(0, 200) + "…";
        reply.textContent = "Not sent: the message is " + message.length.toLocaleString("en") +
          " characters; the chat takes at most " + max.toLocaleString("en") + ". Nothing was cut: shorten it and send again.";
        return;
      }
      text.value = "";
      var finished = null, started = false, run = null;
      try {
        var body = options.body ? options.body(message) : { text: message };
        await stream(form.dataset.url, form.dataset.csrf, body, function (name, payload) {
          started = true;
          if (name === "delta") {
            if (payload.run && run && payload.run !== run) reply.textContent = "";
            run = payload.run || run;
            reply.textContent += payload.text;
          } else if (name === "done") {
            finished = payload;
            if (payload.reply && !payload.mergedInto) reply.textContent = payload.reply;
            if (payload.reply === null) reply.textContent += " (no reply yet: it will appear " + (options.later || "later") + ")";
            pair.className = "chat-pair done";
          }
        });
        pair.className = "chat-pair done";
        if (finished && options.done) await options.done(pair, finished);
      } catch (err) {
        pair.className = "chat-pair failed";
        if (started) reply.textContent += " (" + err.message + ")";
        else reply.textContent = "Not sent: " + err.message;
        if (!started && !text.value) text.value = message;  // refused, nothing typed since: kept to send again
      }
    });
  }

  return { stream: stream, attach: attach };
})();
