--TEST--
Blocks freed by PHP (unset) leave the live profile
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--INI--
memory_limit=512M
; every block sampled, so also any block the extension itself allocates while it samples
memprof.sampling_rate=1K
--FILE--
<?php
function temporary_buffers() {
    $t = [];
    for ($i = 0; $i < 64; $i++) {
        $t[] = str_repeat('t', 1 << 20);
    }
    return $t;
}
function held_by($function) {
    $bytes = 0;
    foreach (memprof_top_sites(100) as $s) {
        if ($s['function'] === $function) {
            $bytes += $s['bytes'];
        }
    }
    return $bytes;
}
memprof_enable();
$t = temporary_buffers();
printf("held while alive: %s\n", held_by('temporary_buffers') > (40 << 20) ? 'yes' : 'no');
unset($t);
printf("after unset: %d bytes\n", held_by('temporary_buffers'));
?>
--EXPECT--
held while alive: yes
after unset: 0 bytes
