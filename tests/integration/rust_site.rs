// SPDX-License-Identifier: MIT
//
// A Rust program for the demangling test: main calls hold_blocks(), which allocates
// 64 x 1 MiB through Rust's default allocator (malloc) and keeps them until exit, so the
// profile's top stack runs through Rust functions whose symbols are mangled (v0 or legacy,
// whichever this rustc uses). Built by the test itself with the rustc it finds.

#[inline(never)]
fn hold_blocks() -> Vec<Vec<u8>> {
    let mut held = Vec::new();
    for i in 0..64u8 {
        let mut block = vec![0u8; 1 << 20];
        block[0] = i;
        held.push(std::hint::black_box(block));
    }
    held
}

fn main() {
    let held = hold_blocks();
    println!("{}", held.len());
    // The blocks stay live: exit without dropping them, so the profile sees them at exit.
    std::process::exit(if held.len() == 64 { 0 } else { 1 });
}
