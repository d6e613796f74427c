"""The agent mailbox: a persisted priority queue of stimuli (this app shadows the stdlib
``mailbox`` module on purpose; nothing in Markus uses the stdlib one)."""

MARKUS_MAILBOX_APP = True
