"""Server-rendered pages: the Agent Mind view (seed section 9), kept live over a
WebSocket that sends the same partial templates the first render used."""
