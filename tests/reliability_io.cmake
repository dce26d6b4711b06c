# Issue 10, I/O layer: files changed under a load, atomic saves onto FIFOs/symlinks/read-only
# files/stale temporaries, 64-bit config sizes, messages of truncated inputs (all in a temp dir).
tq_test(test_reliability_io LABELS fast TIMEOUT 60)
