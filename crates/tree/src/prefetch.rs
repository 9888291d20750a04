//! Loads that start before the value is needed, so that independent
//! cache misses overlap: at a million znodes a lookup's path, its node
//! and the node's data are each a miss, and one after the other they wait
//! each in turn.

/// Starts loading the cache lines of `value`, or of its first
/// `OBJECT_BYTES_MAX` bytes: a node of 96 bytes may span three lines.
#[inline(always)]
pub(crate) fn object<T: ?Sized>(value: &T) {
    // Enough for a node, a slot or a path; a longer value is read line
    // after line, which the hardware's own prefetcher follows.
    const OBJECT_BYTES_MAX: usize = 256;
    let len = std::mem::size_of_val(value).min(OBJECT_BYTES_MAX);
    bytes((value as *const T).cast(), len);
}

/// Starts loading the cache lines that hold `len` bytes from `start`,
/// which may be any address at all: a prefetch does not fault.
#[inline(always)]
pub(crate) fn bytes(start: *const u8, len: usize) {
    const LINE_BYTES: usize = 64;
    if len == 0 {
        return;
    }
    let lines = ((start as usize) % LINE_BYTES + len).div_ceil(LINE_BYTES);
    for line_at in 0..lines {
        line(start.wrapping_add(line_at * LINE_BYTES));
    }
}

/// Starts loading the cache line holding `address`, which may be any
/// address at all: a prefetch does not fault.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn line(address: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and
    // does not fault, whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) };
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn line(_address: *const u8) {}
