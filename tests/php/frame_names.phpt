--TEST--
PHP frames are named like PHP's own backtraces: functions, Class::method, {closure}, {include}, {eval}, generators and fibers, without the executor's dummy frames
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--INI--
memory_limit=512M
--FILE--
<?php
function big($c) { return str_repeat($c, 4 << 20); }
function in_generator() { for ($i = 0; $i < 4; $i++) { yield big('g'); } }
function in_fiber() { $a = []; for ($i = 0; $i < 4; $i++) { $a[] = big('f'); Fiber::suspend(); } return $a; }
class Store { public static function load() { return [big('s'), big('s')]; } }
$included = __DIR__ . '/frame_names.inc';
file_put_contents($included, '<?php return [big("i"), big("i")];');
memprof_enable();
$kept = [];
$kept[] = iterator_to_array(in_generator());
$fiber = new Fiber('in_fiber');
$fiber->start();
while (!$fiber->isTerminated()) {
    $fiber->resume();
}
$kept[] = $fiber->getReturn();
$kept[] = Store::load();
$kept[] = include $included;
$kept[] = eval('return [big("e"), big("e")];');
$kept[] = array_map(fn($c) => big($c), ['c', 'c']);
unlink($included);
$f = fopen('php://memory', 'w+');
memprof_dump($f, 'collapsed');
rewind($f);
$collapsed = stream_get_contents($f);
$callers = [];
foreach (explode("\n", $collapsed) as $line) {
    // The PHP frames from {main} to big(), the caller of interest being just before big.
    // A line ends at its site, the innermost PHP frame (doc/guide.md, "Site names").
    if (preg_match('/;([^;]+);big;str_repeat /', $line, $m)) {
        $callers[$m[1]] = true;
    }
}
ksort($callers);
echo implode("\n", array_keys($callers)), "\n";
// A fiber's function runs right under Fiber::start or Fiber::resume (its bottom frame is
// the executor's, and unnamed).
var_dump((bool)preg_match('/;Fiber::(start|resume);in_fiber;big;/', $collapsed));
?>
--EXPECT--
Store::load
in_fiber
in_generator
{closure}
{eval}
{include}
bool(true)
