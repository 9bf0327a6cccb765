package guest

func toPairs(kv [][2]string) []Pair {
	if len(kv) == 0 {
		return nil
	}
	out := make([]Pair, len(kv))
	for i, e := range kv {
		out[i] = Pair{e[0], e[1]}
	}
	return out
}

func fromPairs(ps []Pair) [][2]string {
	if len(ps) == 0 {
		return nil
	}
	out := make([][2]string, len(ps))
	for i, p := range ps {
		out[i] = [2]string{p.Key, p.Value}
	}
	return out
}
