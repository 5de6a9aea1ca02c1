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
// It holds 100 MiB allocated at one site (hold_big: 400 blocks of 256 KiB through
// std::alloc::alloc) among churn: vectors and boxes allocated and dropped (churn). The eBPF
// tests expect hold_big, demangled, as the top live site with about 100 MiB. With the
// argument "wait" it prints "ready" and waits for a line on stdin before allocating, and
// "done" and waits for another line before exiting (the attach tests). Built with
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

const BIG_BLOCK: usize = 256 << 10;
const BIG_BLOCKS: usize = 400; // 100 MiB

#[inline(never)]
fn hold_big(keep: &mut Vec<*mut u8>) {
    let layout = Layout::from_size_align(BIG_BLOCK, 16).unwrap();
    for _ in 0..BIG_BLOCKS {
        let p = unsafe { std::alloc::alloc(layout) };
        assert!(!p.is_null());
        unsafe { p.write(1) };
        keep.push(p);
    }
}

#[inline(never)]
fn churn(rounds: usize) -> usize {
    let mut sum = 0usize;
    let mut x: usize = 12345;
    for _ in 0..rounds {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = 16 + (x >> 33) % 4096;
        let v: Vec<u8> = vec![7u8; n];
        sum = sum.wrapping_add(v[n - 1] as usize);
        let b = Box::new([x; 4]);
        sum = sum.wrapping_add(b[3] & 1);
    }
    sum
}

#[cfg(not(lib))]
fn wait_for_line() {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
}

// Churn, 100 MiB held at hold_big, churn; the blocks stay allocated.
fn work() -> Vec<*mut u8> {
    let mut keep = Vec::with_capacity(BIG_BLOCKS);
    let s1 = churn(20000);
    hold_big(&mut keep);
    let s2 = churn(20000);
    println!("held {} blocks, churn {}", keep.len(), s1.wrapping_add(s2) & 1);
    keep
}

#[cfg(lib)]
#[no_mangle]
pub extern "C" fn own_alloc_run() {
    std::mem::forget(work()); // the library's blocks stay live until the process exits
}

#[cfg(not(lib))]
fn main() {
    let wait = std::env::args().nth(1).as_deref() == Some("wait");
    if wait {
        println!("ready");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        wait_for_line();
    }
    let _keep = work();
    if wait {
        println!("done");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        wait_for_line();
    }
}
