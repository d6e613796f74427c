"""Long-term memory: each agent's MEMORY.md (sections) and its observations, with
full-text search, and the dream cycle that consolidates them."""
