/** The workerd package's main export: the path of the workerd binary for this platform. */
declare module 'workerd' {
  const binaryPath: string;
  export default binaryPath;
}
