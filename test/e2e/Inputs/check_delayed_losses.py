"""Checks that a --weight-stash run's losses are a plain run's, one step late.

Usage: check_delayed_losses.py PLAIN.losses STASH.losses

The plain run took N steps and the stash run N + 1 from the same weights and
the same batch every step. The stash run's first two steps both read the
initial weights, and its step t + 1 reads what the plain run's step t reads
for t <= 2: W(1) = W(0) - lr * grad f(W(0)) in both. Prints "delayed", or
what differs.
"""

import sys

plain = open(sys.argv[1]).read().split()
stash = open(sys.argv[2]).read().split()
expected = plain[:1] + plain[:2]
if len(plain) >= 2 and stash[:3] == expected:
    print("delayed")
else:
    print("differs: plain " + " ".join(plain) + ", stash " + " ".join(stash))
