# Growable C columns handed out as buffer-protocol Column objects (zero-copy for numpy); the strings helper.

cdef class Column:
    """One detached column: owns its C buffer, exposes it through the buffer protocol."""

    cdef char* data
    cdef Py_ssize_t n
    cdef Py_ssize_t itemsize
    cdef const char* fmt
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self) -> None:
        self.data = NULL
        self.n = 0

    def __dealloc__(self) -> None:
        free(self.data)

    def __len__(self) -> int:
        return self.n

    @property
    def typecode(self) -> str:
        return self.fmt.decode()

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.n
        self.strides[0] = self.itemsize
        view.buf = self.data
        view.obj = self
        view.len = self.n * self.itemsize
        view.readonly = 0
        view.itemsize = self.itemsize
        view.format = <char*>self.fmt if (flags & PyBUF_FORMAT) else NULL
        view.ndim = 1
        view.shape = self.shape if (flags & PyBUF_ND) else NULL
        view.strides = self.strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef Column _adopt(char* data, Py_ssize_t n, Py_ssize_t itemsize):
    cdef Column c = Column.__new__(Column)
    c.data = data
    c.n = n
    c.itemsize = itemsize
    c.fmt = _FMT_Q if itemsize == 8 else _FMT_I if itemsize == 4 else _FMT_H if itemsize == 2 else _FMT_B
    return c


cdef struct Cols:
    Py_ssize_t n
    Py_ssize_t cap
    int ncols
    char* ptr[MAX_COLS]
    Py_ssize_t size[MAX_COLS]


cdef int _cols_init(Cols* t, int ncols, const Py_ssize_t* sizes, Py_ssize_t cap) except -1:
    cdef int k
    t.n = 0
    t.cap = cap
    t.ncols = ncols
    for k in range(MAX_COLS):
        t.ptr[k] = NULL
    for k in range(ncols):
        t.size[k] = sizes[k]
        t.ptr[k] = <char*>malloc(cap * sizes[k])
        if t.ptr[k] == NULL:
            raise MemoryError()
    return 0


cdef void _cols_free(Cols* t) noexcept:
    cdef int k
    for k in range(t.ncols):
        free(t.ptr[k])
        t.ptr[k] = NULL
    t.n = 0
    t.cap = 0


cdef int _cols_grow(Cols* t) except -1:
    cdef Py_ssize_t cap = t.cap * 2 if t.cap else MIN_CAP
    cdef int k
    cdef char* p
    for k in range(t.ncols):
        p = <char*>realloc(t.ptr[k], cap * t.size[k])
        if p == NULL:
            raise MemoryError()
        t.ptr[k] = p
    t.cap = cap
    return 0


cdef tuple _cols_take(Cols* t, Py_ssize_t n):
    """Detach rows [0, n) as Columns; rows [n, len) move to fresh buffers."""
    cdef Py_ssize_t rest = t.n - n
    cdef Py_ssize_t cap = t.cap        # the high-water mark: a steady rate never regrows
    cdef int k
    cdef list out = []
    cdef char* fresh[MAX_COLS]
    while cap < rest:
        cap *= 2
    cdef int j
    for k in range(t.ncols):
        fresh[k] = <char*>malloc(cap * t.size[k])
        if fresh[k] == NULL:
            for j in range(k):
                free(fresh[j])
            raise MemoryError()
    for k in range(t.ncols):
        if rest:
            memcpy(fresh[k], t.ptr[k] + n * t.size[k], rest * t.size[k])
        out.append(_adopt(t.ptr[k], n, t.size[k]))
        t.ptr[k] = fresh[k]
    t.n = rest
    t.cap = cap
    return tuple(out)


def strings(Column indices, names) -> tuple:
    """(offsets, data) buffers of an Arrow StringArray holding names[i] for each i in
    ``indices`` (an int8/int16 Column); an index out of range raises IndexError."""
    cdef list encoded = [name.encode() for name in names]
    cdef Py_ssize_t k = len(encoded), n = indices.n, i, total = 0, ix, ln
    cdef Py_ssize_t* lengths = NULL
    cdef const char** ptrs = NULL
    cdef int32_t* offs
    cdef char* out
    cdef bytes offsets, data
    lengths = <Py_ssize_t*>malloc((k + 1) * sizeof(Py_ssize_t))
    ptrs = <const char**>malloc((k + 1) * sizeof(char*))
    try:
        if lengths == NULL or ptrs == NULL:
            raise MemoryError()
        for i in range(k):
            lengths[i] = PyBytes_GET_SIZE(encoded[i])
            ptrs[i] = PyBytes_AS_STRING(encoded[i])
        for i in range(n):
            ix = (<int16_t*>indices.data)[i] if indices.itemsize == 2 else (<int8_t*>indices.data)[i]
            if ix < 0 or ix >= k:
                raise IndexError(f"name index {ix} of {k}")
            total += lengths[ix]
        if total > 0x7fffffff:
            raise OverflowError("string column over 2 GiB")
        offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
        data = PyBytes_FromStringAndSize(NULL, total)
        offs = <int32_t*>PyBytes_AS_STRING(offsets)
        out = PyBytes_AS_STRING(data)
        total = 0
        offs[0] = 0
        for i in range(n):
            ix = (<int16_t*>indices.data)[i] if indices.itemsize == 2 else (<int8_t*>indices.data)[i]
            ln = lengths[ix]
            memcpy(out + total, ptrs[ix], ln)
            total += ln
            offs[i + 1] = <int32_t>total
    finally:
        free(lengths)
        free(ptrs)
    return offsets, data
