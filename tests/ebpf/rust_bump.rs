// SPDX-License-Identifier: MIT
//
// A Rust program whose #[global_allocator] never calls malloc (bump_arena.rs). It holds
// 100 MiB allocated at one site (hold_big: 400 blocks of 256 KiB through std::alloc::alloc)
// among churn: small vectors and boxes allocated and dropped (their frees reach the
// allocator's dealloc, which ignores them). The eBPF tests profile it and expect hold_big,
// demangled, as the top live site with about 100 MiB. With the argument "wait" it prints
// "ready" and waits for a line on stdin before allocating, and "done" and waits for
// another line before exiting (the attach tests).

use std::alloc::Layout;
use std::io::BufRead;

#[global_allocator]
static GLOBAL: bump_arena::Bump = bump_arena::Bump::new();

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

fn main() {
    let wait = std::env::args().nth(1).as_deref() == Some("wait");
    if wait {
        println!("ready");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
    }
    let mut keep = Vec::with_capacity(BIG_BLOCKS);
    let s1 = churn(20000);
    hold_big(&mut keep);
    let s2 = churn(20000);
    println!("held {} blocks, churn {}", keep.len(), s1.wrapping_add(s2) & 1);
    if wait {
        println!("done");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
    }
}
