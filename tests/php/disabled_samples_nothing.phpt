--TEST--
Nothing is sampled before memprof_enable() or after memprof_disable()
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--INI--
memory_limit=512M
--FILE--
<?php
function allocate($c) {
    $a = [];
    for ($i = 0; $i < 16; $i++) {
        $a[] = str_repeat($c, 4 << 20);
    }
    return $a;
}
function before_enable() { return allocate('b'); }
function while_enabled() { return allocate('w'); }
function after_disable() { return allocate('a'); }
$b = before_enable();
memprof_enable();
$w = while_enabled();
memprof_disable();
$a = after_disable();
// allocate() is the allocating frame of all three: the collapsed stacks tell the callers apart.
$f = fopen('php://memory', 'w+');
memprof_dump($f, 'collapsed');
rewind($f);
$collapsed = stream_get_contents($f);
foreach (['before_enable', 'while_enabled', 'after_disable'] as $fn) {
    printf("%s: %s\n", $fn, strpos($collapsed, ";$fn;allocate;") !== false ? 'sampled' : 'not sampled');
}
?>
--EXPECT--
before_enable: not sampled
while_enabled: sampled
after_disable: not sampled
