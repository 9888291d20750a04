//! Loads that start before the value is needed, so that independent
//! cache misses overlap: at a million znodes a lookup's path, its node
//! and the node's data are each a miss, and one after the other they wait
//! each in turn.

/// Starts loading the cache lines that begin and end `value` (all of a
/// value of up to two lines).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn object<T: ?Sized>(value: &T) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let len = std::mem::size_of_val(value);
    if len == 0 {
        return;
    }
    let first = (value as *const T).cast::<i8>();
    let last = first.wrapping_add(len - 1);
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and
    // does not fault, whatever the address.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(first);
        _mm_prefetch::<_MM_HINT_T0>(last);
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn object<T: ?Sized>(_value: &T) {}
