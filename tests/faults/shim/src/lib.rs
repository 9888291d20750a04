//! Loaded into a server process with `LD_PRELOAD` by the fault harness,
//! this library wraps the calls through which a process meets its disk's
//! speed and its clocks: `fsync` and `fdatasync` first wait the configured
//! delay (a slow disk), and `clock_gettime` adds offsets to the realtime
//! and the monotonic clocks (clock jumps). The harness changes them while
//! the server runs by writing the control file named by the environment
//! variable [`CONTROL_ENV`]; it is mapped into memory here and read on
//! every call, three little-endian 64-bit fields:
//!
//! | bytes  | field                                                   |
//! |--------|---------------------------------------------------------|
//! | 0..8   | delay before each fsync/fdatasync, microseconds (u64)   |
//! | 8..16  | realtime clock offset, nanoseconds (i64)                |
//! | 16..24 | monotonic clock offset, nanoseconds (u64; the harness only ever raises it, so the clock never goes back) |
//!
//! The file must exist when the process starts (the first wrapped call
//! maps it); without the variable or the file every call goes straight
//! through. Nothing here may call a clock through std: inside this library
//! such a call would come back to our own `clock_gettime`.

use std::ffi::{c_int, c_long, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

/// The environment variable naming the control file.
pub const CONTROL_ENV: &CStr = c"PADDOCK_FAULT_SHIM";

const CONTROL_BYTES: usize = 24;

/// The mapped control fields.
#[repr(C)]
struct Control {
    fsync_delay_us: AtomicU64,
    realtime_offset_ns: AtomicI64,
    monotonic_offset_ns: AtomicU64,
}

const UNMAPPED: u8 = 0;
const MAPPING: u8 = 1;
const MAPPED: u8 = 2;
const ABSENT: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNMAPPED);
static CONTROL: AtomicPtr<Control> = AtomicPtr::new(ptr::null_mut());

/// The control fields, mapping the file on first use; `None` when there is
/// none (or while another thread maps it: that call goes straight through).
fn control() -> Option<&'static Control> {
    match STATE.load(Ordering::Acquire) {
        MAPPED => {
            // SAFETY: set once to a mapping that is never unmapped.
            return unsafe { CONTROL.load(Ordering::Acquire).as_ref() };
        }
        UNMAPPED => {}
        _ => return None,
    }
    if STATE
        .compare_exchange(UNMAPPED, MAPPING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return None;
    }
    let mapped = map_control();
    CONTROL.store(mapped, Ordering::Release);
    let state = if mapped.is_null() { ABSENT } else { MAPPED };
    STATE.store(state, Ordering::Release);
    // SAFETY: null or a mapping that is never unmapped.
    unsafe { mapped.as_ref() }
}

fn map_control() -> *mut Control {
    // SAFETY: getenv, open, mmap and close with valid arguments; the
    // mapping is shared and read-only, and outlives every reader (it is
    // never unmapped). The file is never truncated by the harness, so the
    // mapped bytes stay backed.
    unsafe {
        let path = libc::getenv(CONTROL_ENV.as_ptr());
        if path.is_null() {
            return ptr::null_mut();
        }
        let fd = libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return ptr::null_mut();
        }
        let mut stat: libc::stat = std::mem::zeroed();
        let big_enough = libc::fstat(fd, &mut stat) == 0 && stat.st_size >= CONTROL_BYTES as i64;
        let map = if big_enough {
            libc::mmap(
                ptr::null_mut(),
                CONTROL_BYTES,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        if map == libc::MAP_FAILED {
            ptr::null_mut()
        } else {
            map.cast()
        }
    }
}

/// The next definition of `name` after this library: libc's.
fn real(cache: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let cached = cache.load(Ordering::Relaxed);
    if !cached.is_null() {
        return cached;
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    cache.store(found, Ordering::Relaxed);
    found
}

fn slow_disk() {
    if let Some(control) = control() {
        let delay = control.fsync_delay_us.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
    }
}

static REAL_FSYNC: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static REAL_FDATASYNC: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static REAL_CLOCK_GETTIME: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

type SyncFn = unsafe extern "C" fn(c_int) -> c_int;
type ClockFn = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int;

/// # Safety
/// As libc's `fsync`.
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    slow_disk();
    // SAFETY: libc's fsync has this signature.
    let real: SyncFn = unsafe { std::mem::transmute(real(&REAL_FSYNC, c"fsync")) };
    unsafe { real(fd) }
}

/// # Safety
/// As libc's `fdatasync`.
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    slow_disk();
    // SAFETY: libc's fdatasync has this signature.
    let real: SyncFn = unsafe { std::mem::transmute(real(&REAL_FDATASYNC, c"fdatasync")) };
    unsafe { real(fd) }
}

/// # Safety
/// As libc's `clock_gettime`.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(clock: libc::clockid_t, now: *mut libc::timespec) -> c_int {
    // SAFETY: libc's clock_gettime has this signature.
    let real: ClockFn = unsafe { std::mem::transmute(real(&REAL_CLOCK_GETTIME, c"clock_gettime")) };
    let result = unsafe { real(clock, now) };
    if result != 0 || now.is_null() {
        return result;
    }
    let Some(control) = control() else {
        return result;
    };
    let offset = match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE => {
            control.realtime_offset_ns.load(Ordering::Relaxed)
        }
        libc::CLOCK_MONOTONIC
        | libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_BOOTTIME => {
            i64::try_from(control.monotonic_offset_ns.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
        }
        _ => 0,
    };
    if offset != 0 {
        // SAFETY: `now` is non-null and was just filled by libc.
        let now = unsafe { &mut *now };
        let total =
            i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec) + i128::from(offset);
        now.tv_sec = (total.div_euclid(1_000_000_000)) as libc::time_t;
        now.tv_nsec = (total.rem_euclid(1_000_000_000)) as c_long;
    }
    result
}
