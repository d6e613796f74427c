// The connect page's Copy buttons: the text of the block a button names
// (data-copy: its id) to the clipboard; where the clipboard is not offered (a page
// over plain HTTP on another host), the text is selected for Ctrl+C.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy[data-copy]");
  if (!button) return;
  const block = document.getElementById(button.dataset.copy);
  if (!block) return;
  try {
    await navigator.clipboard.writeText(block.textContent);
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(block);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});
