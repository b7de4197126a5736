/**
 * The spec's counter-store mode of a check instance, per store: normal, or degraded after three consecutive
 * failed health checks; back to normal after three consecutive successes. Pure: the caller runs the checks.
 */
type StoreMode = 'normal' | 'degraded';

const FLIP_AFTER = 3;

export class StoreHealth {
  mode: StoreMode = 'normal';
  /** Consecutive results against the current mode. */
  private streak = 0;

  /** Record one health check; returns true when the mode flipped. */
  record(ok: boolean): boolean {
    const against = this.mode === 'normal' ? !ok : ok;
    this.streak = against ? this.streak + 1 : 0;
    if (this.streak < FLIP_AFTER) return false;
    this.mode = this.mode === 'normal' ? 'degraded' : 'normal';
    this.streak = 0;
    return true;
  }

  get degraded(): boolean {
    return this.mode === 'degraded';
  }
}
