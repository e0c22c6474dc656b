<r>{ for tumbling window $w in /photons/photon start at $s when true() only end at $e when $e - $s + 1 eq 10 let $a := count($w) return ($a, <x/>, $a, $a) }</r>
