--TEST--
PHP frames of nested executor loops (a closure run by array_map) merge with the native frames in call order
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function outer() {
    return array_map(function ($i) { return str_repeat('n', 4 << 20); }, range(1, 8));
}
memprof_enable();
$kept = outer();
$f = fopen('php://memory', 'w+');
putenv('MEMPROF_NATIVE=1'); // the native frames between PHP frames, folded by default
memprof_dump($f, 'collapsed');
rewind($f);
foreach (explode("\n", stream_get_contents($f)) as $line) {
    if (strpos($line, '{closure}') === false) {
        continue;
    }
    $frames = explode(';', substr($line, 0, strrpos($line, ' ')));
    $at = [];
    foreach (['{main}', 'outer', 'array_map', 'zend_call_function', '{closure}', 'str_repeat'] as $name) {
        $at[$name] = array_search($name, $frames, true);
    }
    $ordered = !in_array(false, $at, true) && $at['{main}'] < $at['outer']
        && $at['outer'] < $at['array_map'] && $at['array_map'] < $at['zend_call_function']
        && $at['zend_call_function'] < $at['{closure}'] && $at['{closure}'] < $at['str_repeat'];
    echo $ordered ? "in call order\n" : "out of order: $line\n";
    break;
}
?>
--EXPECT--
in call order
