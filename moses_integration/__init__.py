"""Everything on the Moses side: moses.ini, n-best lists, a real Moses, and the embedded Moses-compatible backend."""
