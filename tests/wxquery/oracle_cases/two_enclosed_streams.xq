<r>{ for $p in /photons/photon[phc > 200] return $p/en }{ for tumbling window $w in /photons/photon start at $s when true() only end at $e when $e - $s + 1 eq 30 return sum($w/phc) }</r>
