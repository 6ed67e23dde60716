# What conformance.py and probe.py share: assertions and the step registry.


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


class Steps(list):
    """The steps of a script, in order: (name, function) pairs added by the decorator."""

    def __call__(self, name):
        def register(fn):
            self.append((name, fn))
            return fn

        return register


def failure_text(err):
    """How a step's failure is reported: an assertion's own text, else the error's type too."""
    return str(err) if isinstance(err, AssertionError) else "%s: %s" % (type(err).__name__, err)
