--TEST--
memprof_dump_pprof() writes a gzip'ed pprof profile naming the PHP function to a stream
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function pprof_holder() {
    $a = [];
    for ($i = 0; $i < 8; $i++) {
        $a[] = str_repeat('p', 4 << 20);
    }
    return $a;
}
memprof_enable();
$held = pprof_holder();
$f = fopen('php://memory', 'w+');
var_dump(memprof_dump_pprof($f));
rewind($f);
$data = stream_get_contents($f);
echo bin2hex(substr($data, 0, 2)), "\n";
$proto = gzdecode($data);
var_dump($proto !== false && strpos($proto, 'pprof_holder') !== false);
?>
--EXPECT--
bool(true)
1f8b
bool(true)
