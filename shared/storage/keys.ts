/**
 * Table keys may not contain `/ \ # ?` or control characters; ids and artifact names do.
 * `!XX` escaping keeps keys readable and preserves the order of plain ASCII prefixes well enough
 * for prefix queries (escaping is applied identically to the bounds).
 */
export function encodeKey(s: string): string {
  return s.replace(/[^A-Za-z0-9\-_.~:@=+,;$ ]/g, (c) => {
    const bytes = Buffer.from(c, 'utf8');
    return Array.from(bytes, (b) => '!' + b.toString(16).padStart(2, '0')).join('');
  });
}

export function decodeKey(s: string): string {
  return decodeURIComponent(s.replace(/!([0-9a-f]{2})/g, '%$1'));
}
