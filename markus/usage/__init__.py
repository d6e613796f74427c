"""Usage and budgets: every LLM call recorded with its agent, team, model, scenario,
tokens (input, output, cached input) and cost; budgets per agent and per team checked
before every call (``budgets.gate``)."""
