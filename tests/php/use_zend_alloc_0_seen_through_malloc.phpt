--TEST--
With USE_ZEND_ALLOC=0 (PHP allocates with malloc) the library's malloc hooks see the script's memory, once, with its PHP frames
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
<?php if (!getenv("MEMPROF_PHP_EXT")) die("skip MEMPROF_PHP_EXT (the extension's path) is not set"); ?>
--FILE--
<?php
$script = __DIR__ . '/use_zend_alloc_0.child.php';
file_put_contents($script, '<?php
function malloc_hold() {
    $a = [];
    for ($i = 0; $i < 16; $i++) {
        $a[] = str_repeat("m", 4 << 20);
    }
    return $a;
}
memprof_enable();
$kept = malloc_hold();
$top = memprof_top_sites(1)[0];
printf("%s %s:%d %d\n", $top["function"], basename($top["file"]), $top["line"], $top["bytes"]);
');
// USE_ZEND_ALLOC is read when PHP starts: a child process gets it.
$cmd = sprintf('USE_ZEND_ALLOC=0 %s -n -d extension=%s %s 2>&1', escapeshellarg(PHP_BINARY),
               escapeshellarg(getenv('MEMPROF_PHP_EXT')), escapeshellarg($script));
$out = trim(shell_exec($cmd));
unlink($script);
[$function, $where, $bytes] = explode(' ', $out) + [null, null, 0];
echo "$function $where\n";
$err = $bytes / (64 << 20) - 1;
printf("64 MiB counted once (within 12 %%): %s\n", abs($err) <= 0.12 ? 'yes' : "no ($out)");
?>
--EXPECT--
malloc_hold use_zend_alloc_0.child.php:5
64 MiB counted once (within 12 %): yes
