// SPDX-License-Identifier: MIT
//
// A Rust program whose #[global_allocator] is defined in its own crate, where rustc inlines
// the allocator shims and the allocator's methods into every caller: no symbol marks an
// allocation, only the debug information does (tools/ebpf/dwarfscan.c). The allocator never
// calls malloc: size classes of powers of two carved from one anonymous mapping (mmap,
// called directly), each with a free list, so a freed block is reused and dealloc needs
// its address. Built with `--cfg bump`, dealloc ignores the address and memory is never
// reused (a bump allocator), so nothing in the code knows which block was freed.
//
// Its workload is workload.rs's: 100 MiB held at one site, hold_big, among churn; the eBPF
// tests expect hold_big, demangled, as the top live site with about 100 MiB. Built with
// `--cfg lib --crate-type cdylib`, it is a library whose own_alloc_run() does the same
// work (dlopen_host.c loads it: libraries loaded after the probes were set).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
}

const ARENA: usize = 8 << 30;
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANON_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
const CLASSES: usize = 48;

struct Classes {
    base: AtomicUsize,
    next: AtomicUsize,
    free: [AtomicUsize; CLASSES], // heads of the free lists, 0 when empty
}

// The size class of a layout: blocks of 2^class bytes (at least 16), aligned to their size.
fn class_of(l: &Layout) -> usize {
    let size = l.size().max(l.align()).max(16);
    (usize::BITS - (size - 1).leading_zeros()) as usize
}

impl Classes {
    fn arena(&self) -> usize {
        let base = self.base.load(Ordering::Acquire);
        if base != 0 {
            return base;
        }
        let p = unsafe {
            mmap(std::ptr::null_mut(), ARENA, PROT_READ_WRITE, MAP_PRIVATE_ANON_NORESERVE, -1, 0)
        };
        if p as isize == -1 {
            return 0;
        }
        match self.base.compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => p as usize,
            Err(other) => other, // another thread mapped first; this mapping is leaked
        }
    }
}

unsafe impl GlobalAlloc for Classes {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let class = class_of(&l);
        if class >= CLASSES {
            return std::ptr::null_mut();
        }
        // A freed block of the class first (single-threaded programs: no ABA to fear).
        let mut head = self.free[class].load(Ordering::Acquire);
        while head != 0 {
            let after = *(head as *const usize);
            match self.free[class].compare_exchange(head, after, Ordering::AcqRel,
                                                    Ordering::Acquire) {
                Ok(_) => return head as *mut u8,
                Err(h) => head = h,
            }
        }
        let base = self.arena();
        if base == 0 {
            return std::ptr::null_mut();
        }
        let size = 1usize << class;
        loop {
            let off = self.next.load(Ordering::Relaxed);
            let start = (base + off + size - 1) & !(size - 1);
            if start + size > base + ARENA {
                return std::ptr::null_mut();
            }
            if self.next.compare_exchange(off, start + size - base, Ordering::Relaxed,
                                          Ordering::Relaxed).is_ok() {
                return start as *mut u8;
            }
        }
    }

    #[cfg(not(bump))]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let class = class_of(&l);
        let mut head = self.free[class].load(Ordering::Acquire);
        loop {
            *(p as *mut usize) = head;
            match self.free[class].compare_exchange(head, p as usize, Ordering::AcqRel,
                                                    Ordering::Acquire) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    #[cfg(bump)]
    unsafe fn dealloc(&self, _p: *mut u8, _l: Layout) {}
}

#[global_allocator]
static GLOBAL: Classes = Classes {
    base: AtomicUsize::new(0),
    next: AtomicUsize::new(0),
    free: [const { AtomicUsize::new(0) }; CLASSES],
};

include!("workload.rs");

#[cfg(lib)]
#[no_mangle]
pub extern "C" fn own_alloc_run() {
    std::mem::forget(work()); // the library's blocks stay live until the process exits
}

#[cfg(not(lib))]
fn main() {
    workload_main();
}
