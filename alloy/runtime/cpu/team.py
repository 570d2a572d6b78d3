"""The CPU device's thread team (team.c): the threads that split a parallel kernel's outer loop between them.

A parallel kernel (renderer/c.py) runs its outer loop over a slice [alloy_start, alloy_end) given as two int32
arguments after its own, and exports `<name>_parallel_range`, the loop's full length. The queue's worker calls
alloy_team_run with it: the worker and the size - 1 team threads claim chunks of the range until none is left, and
the call returns once every claimed chunk is done. A chunk is the unclaimed part over twice the team's size (but
not below a floor): big chunks first, few claims, and small ones last, so the threads end together; a thread that
wakes late, or shares its core with Python, takes fewer.
Between calls the team threads sleep on a condition variable after a short bounded spin: unlike OpenMP's idle
threads, which spin for a long while after every parallel region, they leave the cores to Python. On Linux their
affinity leaves out the CPU of the thread that wakes them, so the scheduler does not queue them behind it.

One thread calls alloy_team_run at a time (the queue's worker, or the submitting thread while the queue is idle).
Claims carry the call's number next to the next free iteration in one 64-bit word, so a thread still reaching for
an earlier call's chunk can never take one of the current call with the earlier call's arguments.
team.c takes alloy_call, alloy_now and alloy_spawn from queue.h; queue.py builds it with queue.c into one library and
passes the numbers below as -D defines.
"""
TEAM_SPIN_US = 20        # an idle team thread polls this long before it sleeps (a chain of kernels hands over in it)
SMALLEST_CHUNK = 32     # the floor of a chunk: the range over this many times the team's size (and 1 at least)
WAIT_SPIN_MAX_US = 1000  # the caller polls for the others' last chunks at most this long before it sleeps
