<stats>{
  for tumbling window $w in /photons/photon start at $s when true() only end at $e when $e - $s + 1 eq 25
  let $s := sum($w/en) let $lo := min($w/phc) let $hi := max($w/phc) let $n := count($w)
  return <block><sum>{ $s }</sum><range>{ $lo } - { $hi }</range><n>{ $n }</n></block>
}</stats>
