--TEST--
100 MiB of strings and arrays held by one function: its estimate is within 12 % and it is the top site, with its file and line
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--INI--
memprof.sampling_rate=64K
memory_limit=512M
--FILE--
<?php
function hold_strings_and_arrays() {
    $keep = [];
    for ($i = 0; $i < 400; $i++) {
        $keep[] = [str_repeat(chr(65 + $i % 26), 131072 - 32), array_fill(0, 8192, $i)];
    }
    return $keep;
}
memprof_enable();
// The truth: what the Zend heap grew by (each string is a 128 KiB block, each array's
// data 128 KiB + 8 bytes, which the heap rounds up to 132 KiB: the truth is ~1.5 % above
// the requested sizes the profiler estimates).
$before = memory_get_usage();
$held = hold_strings_and_arrays();
$truth = memory_get_usage() - $before;
$sites = memprof_top_sites(5);
$estimate = 0;
foreach ($sites as $s) {
    if ($s['function'] === 'hold_strings_and_arrays') {
        $estimate += $s['bytes'];
    }
}
$err = $estimate / $truth - 1;
printf("truth about 100 MiB: %s\n", abs($truth / (100 << 20) - 1) < 0.05 ? 'yes' : "no ($truth)");
printf("estimate within 12 %%: %s\n", abs($err) <= 0.12 ? 'yes'
       : sprintf('no (%d against %d, %+.1f %%)', $estimate, $truth, 100 * $err));
printf("top site: %s %s:%d\n", $sites[0]['function'], basename($sites[0]['file']), $sites[0]['line']);
?>
--EXPECT--
truth about 100 MiB: yes
estimate within 12 %: yes
top site: hold_strings_and_arrays accuracy_100mb.php:5
