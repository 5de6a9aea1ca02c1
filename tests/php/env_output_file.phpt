--TEST--
MEMPROF_PHP=1 profiles a whole script without code change and MEMPROF_OUTPUT gets its profile at the end (%p is the pid)
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
<?php if (!getenv("MEMPROF_PHP_EXT")) die("skip MEMPROF_PHP_EXT (the extension's path) is not set"); ?>
--FILE--
<?php
$script = __DIR__ . '/env_output_file.child.php';
file_put_contents($script, '<?php
function env_hold() {
    $a = [];
    for ($i = 0; $i < 16; $i++) {
        $a[] = str_repeat("e", 4 << 20);
    }
    return $a;
}
$kept = env_hold();
echo "child done\n";
');
$out = __DIR__ . '/env_output_file.%p.txt';
$cmd = sprintf('MEMPROF_PHP=1 MEMPROF_OUTPUT=%s %s -n -d extension=%s %s 2>&1',
               escapeshellarg($out), escapeshellarg(PHP_BINARY),
               escapeshellarg(getenv('MEMPROF_PHP_EXT')), escapeshellarg($script));
echo shell_exec($cmd);
$files = glob(__DIR__ . '/env_output_file.[0-9]*.txt');
echo count($files), " profile\n";
$text = file_get_contents($files[0]);
var_dump(str_starts_with($text, 'libmemprof'));
var_dump(strpos($text, 'env_hold (' . $script . ':5)') !== false);
array_map('unlink', $files);
unlink($script);
?>
--EXPECT--
child done
1 profile
bool(true)
bool(true)
