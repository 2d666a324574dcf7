# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Used by both directions: the calendar (timestamps <-> datetime). Constructor widths are
# amqp10_code_width in ext/include/amqp10_values.pxd, shared with the link.

# ---------------------------------------------------------------------------
# calendar (timestamps <-> datetime without Python-level arithmetic)
# ---------------------------------------------------------------------------

cdef inline int64_t floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a / b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q

cdef int64_t days_from_civil(int64_t y, int64_t m, int64_t d) noexcept nogil:
    if m <= 2:
        y -= 1
    cdef int64_t era = floordiv(y, 400)
    cdef int64_t yoe = y - era * 400
    cdef int64_t mp = (m + 9) % 12
    cdef int64_t doy = (153 * mp + 2) / 5 + d - 1
    cdef int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468

cdef object datetime_from_ms(int64_t ms, Py_ssize_t offset):
    # datetime covers years 1..9999: -62135596800000 .. 253402300799999 ms
    if ms < -62135596800000 or ms > 253402300799999:
        raise CodecError(f"timestamp {ms} ms is outside the datetime range", offset)
    cdef int64_t days = floordiv(ms, 86400000)
    cdef int64_t rem = ms - days * 86400000
    cdef int64_t z = days + 719468
    cdef int64_t era = floordiv(z, 146097)
    cdef int64_t doe = z - era * 146097
    cdef int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    cdef int64_t y = yoe + era * 400
    cdef int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    cdef int64_t mp = (5 * doy + 2) / 153
    cdef int64_t d = doy - (153 * mp + 2) / 5 + 1
    cdef int64_t m = mp + 3 if mp < 10 else mp - 9
    if m <= 2:
        y += 1
    return datetime_new(<int>y, <int>m, <int>d, <int>(rem / 3600000), <int>((rem / 60000) % 60),
                        <int>((rem / 1000) % 60), <int>((rem % 1000) * 1000), UTC)

cdef int64_t ms_from_datetime(object dt) except? -1:
    cdef int64_t days = days_from_civil(datetime_year(dt), datetime_month(dt), datetime_day(dt))
    cdef int64_t ms = (days * 86400000 + datetime_hour(dt) * 3600000
                       + datetime_minute(dt) * 60000 + datetime_second(dt) * 1000
                       + datetime_microsecond(dt) / 1000)
    tz = datetime_tzinfo(dt)
    if tz is not None and tz is not UTC:
        off = dt.utcoffset()
        if off is not None:
            ms -= (off.days * 86400000 + off.seconds * 1000 + off.microseconds // 1000)
    return ms
