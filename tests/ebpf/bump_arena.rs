// SPDX-License-Identifier: MIT
//
// A global allocator that never calls malloc, in a crate of its own as allocator crates
// are: a bump allocator over one anonymous mapping (mmap, called directly) that never
// reuses memory (frees are only counted). Being another crate's, its GlobalAlloc methods stay functions the eBPF
// probes can see: rustc inlines the allocator shims (__rust_alloc & co.) into the program's
// crate, where they become direct calls of these methods. Used by rust_bump.rs.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
}

const ARENA: usize = 4 << 30;
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANON_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;

pub struct Bump {
    base: AtomicUsize,
    next: AtomicUsize,
    frees: AtomicUsize,
}

impl Bump {
    pub const fn new() -> Bump {
        Bump { base: AtomicUsize::new(0), next: AtomicUsize::new(0), frees: AtomicUsize::new(0) }
    }
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let mut base = self.base.load(Ordering::Acquire);
        if base == 0 {
            let p = mmap(std::ptr::null_mut(), ARENA, PROT_READ_WRITE,
                         MAP_PRIVATE_ANON_NORESERVE, -1, 0);
            if p as isize == -1 {
                return std::ptr::null_mut();
            }
            base = match self.base.compare_exchange(0, p as usize, Ordering::AcqRel,
                                                    Ordering::Acquire) {
                Ok(_) => p as usize,
                Err(other) => other, // another thread mapped first; this mapping is leaked
            };
        }
        let align = l.align().max(16);
        loop {
            let off = self.next.load(Ordering::Relaxed);
            let start = (base + off + align - 1) & !(align - 1);
            let end = start + l.size();
            if end > base + ARENA {
                return std::ptr::null_mut();
            }
            if self.next.compare_exchange(off, end - base, Ordering::Relaxed,
                                          Ordering::Relaxed).is_ok() {
                return start as *mut u8;
            }
        }
    }
    // Memory is never reused; frees are only counted. Out of line as a real allocator's
    // dealloc is: rustc inlines a body this small into the program's crate, where no probe
    // would see the free.
    #[inline(never)]
    unsafe fn dealloc(&self, _p: *mut u8, _l: Layout) {
        self.frees.fetch_add(1, Ordering::Relaxed);
    }
}
