<r>{
  for tumbling window $w in /photons/photon start at $s when true() only end at $e when $e - $s + 1 eq 50
  let $a := min($w/en) let $b := max($w/en) let $c := count($w/missing)
  let $z := sum($w/missing) let $v := avg($w/missing)
  return (<mm>{ ($a, $b) }</mm>, <e>{ $c }{ $z }</e>, <v>{ $v }</v>, <t>range: { $a } to { $b }</t>)
}</r>
