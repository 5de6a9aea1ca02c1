--TEST--
The extension's Zend heap hook (emalloc_sampled) is in no stack, even with every native frame shown, and the text report names the site by its PHP function
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function fill_cache() {
    $parts = [];
    for ($i = 0; $i < 16; $i++) {
        $parts[] = str_repeat('h', 1 << 20);
    }
    return $parts;
}
memprof_enable();
$kept = fill_cache();
// The extension marks itself as hook code (memprof_register_hook_code()): its frames are
// dropped when stacks are captured and resolved (doc/guide.md, "Site names").
putenv('MEMPROF_NATIVE=1');
$f = fopen('php://memory', 'w+');
memprof_dump($f, 'collapsed');
rewind($f);
$collapsed = stream_get_contents($f);
var_dump(strpos($collapsed, 'fill_cache') !== false);
var_dump(strpos($collapsed, 'emalloc_sampled') === false);
putenv('MEMPROF_NATIVE');
$f = fopen('php://memory', 'w+');
memprof_dump($f, 'text');
rewind($f);
// The first ranked site ends with the PHP frame that allocated.
var_dump((bool)preg_match('/^  1\. .*  (str_repeat|fill_cache)$/m', stream_get_contents($f)));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
