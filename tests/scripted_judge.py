"""A judge for grader tests: it replays fixed replies and records what it was asked."""


class Scripted:
    """A judge that replays fixed replies and records what it was asked."""

    name = "scripted"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def __call__(self, prompt, system=None):
        self.calls.append((prompt, system))
        return self.replies.pop(0)
