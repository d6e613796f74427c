"""The kernel: what every app may use and that imports no app (ids, errors, the
database helpers, actors, the event sender, the channel layer, API error mapping and
schema helpers). Checked by the layer contract in .importlinter."""
