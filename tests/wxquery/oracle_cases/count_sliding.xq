<s>{ for sliding window $w in /photons/photon[en >= 0.5]
       start at $s when ($s - 1) mod 15 eq 0
       only end at $e when $e - $s + 1 eq 40
     let $a := avg($w/en)
     where $a > 1.0
     return <a>{ $a }</a> }</s>
