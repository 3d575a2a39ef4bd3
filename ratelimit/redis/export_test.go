package redis

import goredis "github.com/redis/go-redis/v9"

// Resalt gives l's scripts SHA1s Redis has never seen, as after a restart
// or SCRIPT FLUSH, without flushing the scripts of anyone sharing the
// server. It returns the new hashes.
func Resalt(l *Limiter, salt string) []string {
	l.admit = goredis.NewScript(admitLua + "\n-- " + salt)
	l.charge = goredis.NewScript(chargeLua + "\n-- " + salt)
	l.release = goredis.NewScript(releaseLua + "\n-- " + salt)
	return []string{l.admit.Hash(), l.charge.Hash(), l.release.Hash()}
}
