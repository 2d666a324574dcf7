"""The send clock's timer: a Linux timerfd armed at absolute wall-clock nanoseconds, in C.

Why not ctypes: arming happens once per wake-up of the send clock (each rate-limited message when
producers are spread), and a ctypes call with its Structure fields cost microseconds of the
client's CPU per message; here it is one syscall. Re-arming also resets the timer's expiry count
(timerfd_settime), so a wake-up needs no read() to clear the descriptor when it re-arms at once.
"""
from libc.errno cimport errno
from libc.stdint cimport int64_t


cdef extern from "<sys/timerfd.h>" nogil:
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    cdef struct itimerspec:
        timespec it_interval
        timespec it_value
    int timerfd_create(int clockid, int flags)
    int timerfd_settime(int fd, int flags, const itimerspec* new_value, itimerspec* old_value)
    int TFD_NONBLOCK
    int TFD_CLOEXEC
    int TFD_TIMER_ABSTIME

cdef extern from "<sys/prctl.h>" nogil:
    int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5)
    int PR_SET_TIMERSLACK

cdef extern from "<time.h>" nogil:
    int CLOCK_REALTIME

cdef extern from "<unistd.h>" nogil:
    int close(int fd)


def set_timer_slack(long ns) -> None:
    """The calling thread's timer slack (how late the kernel may fire its timers), in ns."""
    if prctl(PR_SET_TIMERSLACK, <unsigned long>ns, 0, 0, 0) != 0:
        raise OSError(errno, "prctl(PR_SET_TIMERSLACK) failed")


cdef class TimerFd:
    """A non-blocking CLOCK_REALTIME timerfd, armed one-shot at absolute ns."""

    cdef int _fd
    cdef itimerspec _spec

    def __cinit__(self) -> None:
        self._fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC)
        if self._fd < 0:
            raise OSError(errno, "timerfd_create failed")
        self._spec.it_interval.tv_sec = 0
        self._spec.it_interval.tv_nsec = 0

    @property
    def fd(self) -> int:
        return self._fd

    cpdef arm(self, int64_t at_ns):
        """Fire once at wall-clock ``at_ns``; 0 disarms; a time already past fires at once. Either way the
        descriptor stops being readable until it fires again."""
        if self._fd < 0:
            raise ValueError("timer is closed")
        if at_ns < 0:
            at_ns = 1
        self._spec.it_value.tv_sec = at_ns // 1000000000
        self._spec.it_value.tv_nsec = at_ns % 1000000000
        if timerfd_settime(self._fd, TFD_TIMER_ABSTIME, &self._spec, NULL) != 0:
            raise OSError(errno, "timerfd_settime failed")

    def close(self) -> None:
        if self._fd >= 0:
            close(self._fd)
            self._fd = -1

    def __dealloc__(self) -> None:
        if self._fd >= 0:
            close(self._fd)
