/** "Did you mean": the known names closest to a mistyped one. */

/** Edit distance (insertions, deletions, substitutions), case-insensitive. */
export function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[y.length];
}

/** Up to `n` names near `name`: within a third of its length, or containing it. */
export function closest(name: string, names: string[], n = 5): string[] {
  const limit = Math.max(2, Math.ceil(name.length / 3));
  return names
    .map((c) => ({ c, d: c.toLowerCase().includes(name.toLowerCase()) ? 0 : distance(name, c) }))
    .filter((x) => x.d <= limit)
    .sort((p, q) => p.d - q.d || p.c.localeCompare(q.c))
    .slice(0, n)
    .map((x) => x.c);
}
