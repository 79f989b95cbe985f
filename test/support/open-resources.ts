/**
 * Test-side registry of things a test opened (pools, DataSources, engines, child processes).
 * `leak-check.ts` fails the file if any is still open when the file ends: every test closes
 * what it opens.
 */
interface OpenResource {
  readonly label: string;
  isOpen(): boolean;
}

const resources = new Set<OpenResource>();

export function trackResource(label: string, isOpen: () => boolean): void {
  resources.add({ label, isOpen });
}

export function openResources(): string[] {
  const open: string[] = [];
  for (const resource of resources) {
    if (resource.isOpen()) open.push(resource.label);
    else resources.delete(resource);
  }
  return open;
}
