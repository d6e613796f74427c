/* The work pages: "Reply" on a comment points the comment form at it. (Delegated from
   <body>: the comments are swapped in again by the live updates.) */
(function () {
  "use strict";
  document.body.addEventListener("click", function (e) {
    var button = e.target.closest("button.reply");
    var field = document.getElementById("reply-to");
    if (button && field) {
      field.value = button.dataset.comment;
      document.getElementById("replying-to").textContent = button.dataset.author;
      document.getElementById("replying").hidden = false;
      document.getElementById("comment-text").focus();
    } else if (e.target.id === "reply-cancel" && field) {
      field.value = "";
      document.getElementById("replying").hidden = true;
    }
  });
})();
