/** The one in-process cache: bounded (least recently set goes first) with an optional time to live. */
import { BoundedCache } from '../../shared/bounded-cache';

test('past its bound the least recently set entry goes; setting a key again makes it the newest', () => {
  const c = new BoundedCache<string, number>(2);
  c.set('a', 1).set('b', 2);
  c.set('a', 3); // 'b' is now the oldest
  c.set('c', 4);
  expect([c.get('a'), c.get('b'), c.get('c'), c.size]).toEqual([3, undefined, 4, 2]);
});

test('an entry older than the time to live is not answered (and is dropped)', () => {
  let t = 0;
  const c = new BoundedCache<string, string>(10, { ttlMs: 100, now: () => t });
  c.set('k', 'v');
  t = 99;
  expect(c.get('k')).toBe('v');
  t = 100;
  expect(c.has('k')).toBe(false);
  expect(c.size).toBe(0);
});
